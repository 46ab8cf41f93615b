CREATE TABLE `punctual_task_runs` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`task_id` bigint unsigned NOT NULL,
	`attempt` int unsigned NOT NULL,
	`outcome` enum('done','retry','failed','lost') NOT NULL,
	`due_at` datetime(3) NOT NULL,
	`started_at` datetime(3) NOT NULL,
	`finished_at` datetime(3) NOT NULL,
	`lateness_ms` bigint NOT NULL,
	`duration_ms` int unsigned NOT NULL,
	`error` text,
	`http_status` smallint unsigned,
	`process` varchar(64) NOT NULL,
	CONSTRAINT `task_runs_id` PRIMARY KEY(`id`)
);
--> statement-breakpoint
ALTER TABLE `punctual_task_runs` ADD CONSTRAINT `task_runs_task_fk` FOREIGN KEY (`task_id`) REFERENCES `punctual_tasks`(`id`) ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX `task_runs_task` ON `punctual_task_runs` (`task_id`,`id`);